"""Model access: every call goes through litellm (hosted providers, the embedded model, test fakes).

Importing this package imports neither litellm nor llama.cpp, and changes nothing in the environment.
"""
