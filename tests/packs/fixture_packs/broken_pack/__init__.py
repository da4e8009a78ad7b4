import a_module_that_does_not_exist  # noqa: F401  (the pack fails to import)

NODE_CLASS_MAPPINGS = {}
