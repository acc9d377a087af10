"""Signal analysis below every dimension: frame measures and the progress curves p(t)."""
