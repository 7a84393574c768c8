"""Settings: one frozen object built once from TOOLPROXY_* variables and the optional YAML file."""
