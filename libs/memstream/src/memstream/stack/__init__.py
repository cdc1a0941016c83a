"""The embedded stack: binaries, child processes, restore and the stack file."""
