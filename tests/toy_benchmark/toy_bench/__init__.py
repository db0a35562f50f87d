"""A toy benchmark for harness-s: each task shows a word; the agent wins by saying it back."""
