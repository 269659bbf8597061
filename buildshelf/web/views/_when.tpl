<time datetime="{{b.iso}}">{{b.date}}</time>
