"""The serving side: waitress, its connections and the access log. Only it imports waitress."""
