"""Tests of the HTTP edge (proxy/edge/): protocol guards, body limits, canonical paths, disconnects, draining and
shutdown."""
