"""Options: the option table, the config file, the layers, the resolved settings."""
