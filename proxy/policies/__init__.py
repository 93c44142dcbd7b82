"""Policy files shipped with contextlift: the built-in reference policy and the commented example."""
