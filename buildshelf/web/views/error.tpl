% include('_head.tpl', title=title, feeds=feeds)
<h1>{{"Not found" if status == 404 else "Bad request" if status == 400 else "Error"}}</h1>
<p class="lead">{{message}}</p>
<p><a href="/">See all projects</a></p>
% include('_foot.tpl')
