"""`memstream up`: the supervisor of the embedded stack, its stack file, restore and status."""
