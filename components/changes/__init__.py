"""The Changes page's tabs, one module each: review (the requests waiting, to approve or reject)
and history (the decided ones); wording holds how both put a request in words."""
