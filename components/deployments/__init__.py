"""The Deployments page's tabs, one module each: overview (delivery metrics, heatmaps, every agent's
state in every environment; its sections in metrics, heatmaps and status), deploy (the form, the
preview in preview, and a live follow of the job), jobs and history. What they share: tabs (the
tab open, and the way to the Jobs tab filtered to some jobs) and tables (how their tables show
states, results and versions)."""
