"""transcripts subpackage."""
