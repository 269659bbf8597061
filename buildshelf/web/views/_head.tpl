<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>{{title}}</title>
<link rel="stylesheet" href="/static/style.css">
<link rel="icon" href="/static/icon.svg" type="image/svg+xml">
% for feed_title, href in feeds:
<link rel="alternate" type="application/atom+xml" title="{{feed_title}}" href="{{href}}">
% end
</head>
% if get("wide"):
<body class="wide">
% else:
<body>
% end
<a class="skip" href="#main">Skip to the content</a>
<header class="site">
  <div class="wrap">
    <a class="brand" href="/">Buildshelf</a>
    <nav aria-label="Site">
      <a href="/">All projects</a>
      <a href="/api-document">API document</a>
    </nav>
  </div>
</header>
<main id="main" class="wrap">
