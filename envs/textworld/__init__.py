"""TextWorld (the ALFWorld kind): generated games, per-rollout interpreters, the game's own win check."""
