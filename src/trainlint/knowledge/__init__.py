"""What the world says: library versions in use, library behaviour per version, model and GPU catalogs."""
