"""Names shared by the CTDE modules and the Ray-free env and layout code."""

CRITIC_ID = "central_critic"
LOCAL, STATE = "obs", "state"
