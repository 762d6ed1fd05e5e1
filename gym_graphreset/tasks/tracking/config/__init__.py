"""The tracking task per robot."""
