"""The Deployments page's tabs, one module each: overview (how delivery is going and every agent's
state in every environment, drawn by its sections metrics, heatmaps and status), deploy (the form
and a live follow of the job; what a preview shows is in preview), jobs and history. What they
share: tabs (the tab open, and the way to the Jobs tab filtered to some jobs) and tables (how
their tables show states, results and versions)."""
