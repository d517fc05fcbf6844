"""The spoke-memory family (issue 28): wire models, op table, schemas, dispatch."""
