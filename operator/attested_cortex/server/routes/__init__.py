"""HTTP routes, one module per resource; each only parses, calls the service, and answers."""
