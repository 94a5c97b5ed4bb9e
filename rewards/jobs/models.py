"""Reward-model jobs (filled in by the training-jobs work)."""
