"""fusednn (temporary)."""
