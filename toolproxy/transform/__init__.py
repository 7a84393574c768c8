"""Request and response transforms: the chat request read and checked, prompt mode, the OpenAI answer shape."""
