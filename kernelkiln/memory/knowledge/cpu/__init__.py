"""CPU (C/C++) knowledge documents."""
