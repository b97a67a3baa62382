"""round_reference: the code a round works on (the best verified code so far, or the original)."""
