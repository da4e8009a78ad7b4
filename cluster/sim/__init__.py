"""Discrete-event simulation of Comfy Cluster and its monolithic baselines on modelled GPUs."""
