"""Governance in the console: the policy editor's check, scope and examples (editor), what runs now
against every policy (compliance), exceptions, and how a violation is shown wherever one appears
(violations: the Deployments preview, the compliance view, a refused deployment)."""
