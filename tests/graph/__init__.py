"""Knowledge-graph tests: links, both graph backends, their equivalence and bad input."""
