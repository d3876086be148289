"""The training dashboard (``caliper view``): Dear ImGui + ImPlot drawn by the engine."""
