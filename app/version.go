package app

// Version is set at link time by the Makefile (git describe).
var Version = "dev"
