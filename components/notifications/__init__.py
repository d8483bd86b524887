"""The Notifications page's tabs, one module each: deliveries, log (every attempt), channels (with
one channel's controls in channel_controls) and subscriptions; and what the page shows above them:
health (tiles and charts of how deliveries are going) and delivery (one delivery's detail).
tables holds what the deliveries and the log share."""
