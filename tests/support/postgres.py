"""PostgreSQL fixtures (filled in by the test-infrastructure work)."""
