"""What every capability uses and nothing capability-specific: HTTP, config, secrets, errors, output, budgets."""
