"""Making stimuli: plan the grid, render and measure clips, verify, audit for shortcuts,
describe the dataset. Dimension modules (``vocalgrad.dimensions``) plug into this stage."""
