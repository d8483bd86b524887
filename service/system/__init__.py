"""The service's own endpoints: health, who a key is, a console's sign-in."""
