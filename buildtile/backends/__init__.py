"""Built-in backends, each registered through the ``buildtile.backends`` entry points."""
