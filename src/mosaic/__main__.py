from mosaic.clients.cli import main

raise SystemExit(main())
