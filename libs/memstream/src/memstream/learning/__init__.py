"""Learning from use: checkout traces, the retrospective pass and feedback priors."""
