"""A noisy poll: each respondent adds Laplace noise of its own scale to its answer."""
