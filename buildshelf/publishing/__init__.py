"""Publishing's credentials: scoped tokens, trusted publishers and their GitHub OIDC tokens."""
