"""The Agents page's pieces: config (the fields of the create and edit forms) and an agent's tabs,
one module each: draft, edit, versions, compare and deployments."""
