"""The Registries page's artifact browser (artifacts) and its tabs, one module each: content,
versions, compare, publish and labels."""
