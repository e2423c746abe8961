"""`trainlint verify`: run a flagged training script for a few real steps and measure what the fix saves."""
