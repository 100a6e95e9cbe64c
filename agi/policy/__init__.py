"""What agi itself enforces: permission rules, the guard, the Bash judge, the sandbox, child
environments and key withholding, redaction, text safety."""
