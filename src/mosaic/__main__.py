from mosaic.cli import main

raise SystemExit(main())
