"""Mesa agents with private types, and the learners that choose their next strategy."""
