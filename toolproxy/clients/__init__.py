"""What is specific to client families: VTC detection and XML answers, client prompts and history."""
