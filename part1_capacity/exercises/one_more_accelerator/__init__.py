"""Exercise: the context at which a deployment needs one more accelerator, found with the calculator."""
