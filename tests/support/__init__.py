"""What more than one test file uses: fakes, builders of topics and rounds, constants, paths."""
