"""Where data lives: the database (engine, sessions, migrations applied), identifiers, encryption at
rest, answers written as JSON by the database, and answers kept in this process's memory."""
